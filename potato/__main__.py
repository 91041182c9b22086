import sys

from potato.commands.cli import main

sys.exit(main())
