"""``python -m cloud``: the same as the ``farm-cloud`` console script."""

from cloud.cli import main

main()
