import sys

from gateway.cli.app import main

sys.exit(main())
