"""`python -m forgebench.cli ...`: the `forgebench` command without its console script."""

import sys

from forgebench.cli import main

sys.exit(main())
