import sys

from potato.cli import main

sys.exit(main())
