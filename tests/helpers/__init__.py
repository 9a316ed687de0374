"""What several test modules share, one module per idea; test modules import from here, never from each other."""
