"""``python -m integration_tests.fuzz``: see cli.py."""

import sys

from integration_tests.fuzz.cli import main

sys.exit(main())
