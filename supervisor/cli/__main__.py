"""`python -m supervisor.cli`: the same entry point as the `shepherd` script."""

import sys

from supervisor.cli.main import main

sys.exit(main())
