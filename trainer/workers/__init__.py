"""Workers are plain classes; Ray wraps them as actors, or the driver calls them in-process."""
