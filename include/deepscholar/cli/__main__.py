"""`python -m deepscholar.cli ...`: the `deepscholar` command."""

import sys

from deepscholar.cli import main

sys.exit(main())
