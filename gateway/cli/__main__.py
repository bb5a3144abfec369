"""``python -m gateway.cli``: the ``talon`` command."""

import sys

from gateway.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
