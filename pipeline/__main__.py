"""``python -m pipeline`` runs the CLI."""

from .cli import main

main()
