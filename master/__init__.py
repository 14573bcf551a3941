"""bats.master."""
