"""The `jaxdev` command line: thin click commands over `jaxdev.audit`."""
