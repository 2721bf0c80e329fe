"""The public Kafka listener: Kafka's own clients and tools talk to the broker (issue 32).

``listener`` accepts connections and keeps each one's answers in request order; ``dispatch``
is the one table of the APIs served (api key -> versions -> handler); the other modules each
serve one API (or a few of one concern) over the broker's own produce, fetch and offsets paths.
``groups/`` holds the classic consumer-group machine (pure).
"""
