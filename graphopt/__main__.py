import sys

from graphopt.cli import main

sys.exit(main())
