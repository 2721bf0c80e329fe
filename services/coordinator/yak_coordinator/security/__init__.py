"""The admin API's authentication and ACL authorization (only with ``YAK_SECURITY=on``)."""
