"""``bench_schema``'s pure parts: the bench record fits its Avro schema, the figures, and the
block of docs/benchmarks.md replacing only itself."""

from __future__ import annotations

import io
from typing import Any

import fastavro

from loadtest.bench_schema import BEGIN, END, SCHEMA, block, document, event, replace_block


def measured() -> dict[str, Any]:
    return {
        "rates": {"json": [1000.0, 1200.0], "avro": [900.0, 780.0]},
        "cpu": {"json": [10.0, 11.0], "avro": [14.0, 13.5]},
        "consumed": {"json": 2000.0, "avro": 1500.0},
        "produced": {"json": 100, "avro": 100},
    }


def test_the_records_fit_the_schema() -> None:
    parsed = fastavro.parse_schema(SCHEMA)
    for i in range(20):
        assert fastavro.validate(event(i), parsed)
        fastavro.schemaless_writer(io.BytesIO(), parsed, event(i))


def test_the_ratio_is_best_against_best() -> None:
    doc = document(measured(), (1.0, 1.0, 1.0))
    assert doc["avro_vs_json_ratio"] == 0.75
    assert doc["avro_vs_json_ratio_median"] == round(840 / 1100, 3)
    assert doc["goals"]["avro_vs_json_ratio"]["met"] is True
    assert doc["avro_proxy_cpu_us_per_record"] == 13.5
    assert doc["avro_vs_json_consume_ratio"] == 0.75


def test_the_block_replaces_only_itself() -> None:
    doc = document(measured(), (1.0, 1.0, 1.0))
    new = block(doc)
    assert new.startswith(BEGIN)
    assert new.rstrip().endswith(END)
    assert "| `avro_vs_json_ratio` | 0.750 |" in new
    page = f"# Page\n\nbefore\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    replaced = replace_block(page, new)
    assert "old" not in replaced
    assert replaced.startswith("# Page\n\nbefore\n\n")
    assert replaced.endswith("after\n")
    assert replace_block("# Page\n", new) == "# Page\n\n" + new
