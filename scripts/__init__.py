"""Research harnesses run from the repository root (`python -m scripts.<name>`), outside the library."""
