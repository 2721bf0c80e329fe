"""The member side of the consumer-group protocol, pure: values (``member_state``) and
decisions over them (``member_protocol``). No asyncio, no clock, no store: an import contract
in pyproject keeps it so; the drivers are in ``consume.holding``."""
