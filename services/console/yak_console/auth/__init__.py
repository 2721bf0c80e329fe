"""Console login: sessions, roles and CSRF (only with ``YAK_SECURITY=on``)."""
