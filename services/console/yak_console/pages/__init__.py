"""The console's pages: one router module per page, sharing ``common``'s renderer."""
