"""Wire models of Yak's HTTP APIs, shared by the services that serve them and their clients."""

__all__: list[str] = []
