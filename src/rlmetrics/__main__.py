"""``python -m rlmetrics``: the ``rlmetrics`` command line."""

from rlmetrics.cli.app import main

if __name__ == "__main__":
    main()
