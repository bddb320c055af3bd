# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Structured payloads as tools return them: JSON APIs, logs, tables, dumps, identifiers.

These are the legitimately repetitive inputs (repeated keys, timestamps, separators,
hex digits) that a padding detector must not confuse with an attack.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from datetime import datetime, timedelta, timezone

from tests.corpora.text import english_sentence, words

_FIRST = ("Ada", "Bo", "Carmen", "Deepak", "Elif", "Farid", "Grace", "Hiro", "Ivana", "Jamal", "Kofi", "Lena")
_LAST = ("Okafor", "Nguyen", "Silva", "Kowalski", "Haddad", "Tanaka", "Müller", "Rossi", "Dubois", "Singh")
_STATUS = ("active", "suspended", "pending", "deleted")
_LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR")
_EPOCH = datetime(2024, 3, 1, tzinfo=timezone.utc)


def uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def timestamp(rng: random.Random, *, spread_days: int = 400) -> str:
    moment = _EPOCH + timedelta(
        seconds=rng.randint(0, spread_days * 86400), microseconds=rng.randint(0, 999999)
    )
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def user_record(rng: random.Random, n: int) -> dict[str, object]:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    return {
        "id": 10_000 + n,
        "uuid": uid(rng),
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
        "status": rng.choice(_STATUS),
        "roles": rng.sample(["admin", "editor", "viewer", "billing", "support"], rng.randint(1, 3)),
        "created_at": timestamp(rng),
        "score": round(rng.uniform(0, 100), 2),
        "verified": rng.random() < 0.7,
        "address": {
            "city": rng.choice(("Lagos", "Lyon", "Osaka", "Lima", "Pune")),
            "zip": f"{rng.randint(0, 99999):05d}",
        },
        "bio": english_sentence(rng) if rng.random() < 0.5 else None,
    }


def json_records(rng: random.Random, count: int, *, indent: int | None = None) -> str:
    """A paginated list endpoint: the same keys in every record."""
    page = {"data": [user_record(rng, n) for n in range(count)], "page": 1, "total": count, "next": None}
    separators = (",", ":") if indent is None else None
    return json.dumps(page, ensure_ascii=False, indent=indent, separators=separators)


def sparse_records(rng: random.Random, count: int) -> str:
    """Issue-tracker records: many null, false and empty fields, the same in every record."""
    records = []
    for n in range(count):
        records.append(
            {
                "id": 70_000 + n,
                "number": n + 1,
                "title": english_sentence(rng, low=3, high=9),
                "state": rng.choice(("open", "closed")),
                "locked": False,
                "assignee": None,
                "assignees": [],
                "milestone": None,
                "labels": [] if rng.random() < 0.7 else [{"name": rng.choice(("bug", "docs", "feature"))}],
                "comments": rng.randint(0, 3),
                "created_at": timestamp(rng),
                "closed_at": None,
                "author_association": "NONE",
                "active_lock_reason": None,
                "draft": False,
                "reactions": {"total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0},
                "performed_via_github_app": None,
            }
        )
    return json.dumps(records, indent=2)


def json_log_lines(rng: random.Random, lines: int) -> str:
    out = []
    for _ in range(lines):
        event = {
            "ts": timestamp(rng, spread_days=1),
            "level": rng.choice(_LEVELS),
            "logger": rng.choice(("api.http", "db.pool", "worker.jobs", "auth")),
            "msg": english_sentence(rng, low=3, high=10),
            "trace_id": f"{rng.getrandbits(128):032x}",
            "duration_ms": round(rng.expovariate(1 / 40), 3),
        }
        out.append(json.dumps(event))
    return "\n".join(out)


def numbers_array(rng: random.Random, count: int) -> str:
    values = [
        round(rng.gauss(50, 20), rng.randint(0, 4)) if rng.random() < 0.8 else rng.randint(-9, 999)
        for _ in range(count)
    ]
    return json.dumps({"series": "cpu_load", "unit": "percent", "values": values})


def geojson(rng: random.Random, features: int) -> str:
    out = []
    for n in range(features):
        lon, lat = rng.uniform(-10, 30), rng.uniform(35, 60)
        ring = [
            [round(lon + rng.uniform(-0.05, 0.05), 6), round(lat + rng.uniform(-0.05, 0.05), 6)]
            for _ in range(rng.randint(4, 40))
        ]
        ring.append(ring[0])
        out.append(
            {
                "type": "Feature",
                "id": n,
                "properties": {
                    "name": " ".join(words(rng, "en", 2)).title(),
                    "area_km2": round(rng.uniform(0.1, 90), 3),
                },
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        )
    return json.dumps({"type": "FeatureCollection", "features": out})


def base64_blob(rng: random.Random, raw_bytes: int, *, line: int = 0) -> str:
    """Base64 of compressed-looking bytes (an image or archive), optionally MIME-wrapped."""
    text = base64.b64encode(rng.randbytes(raw_bytes)).decode("ascii")
    if line:
        text = "\n".join(text[i : i + line] for i in range(0, len(text), line))
    return text


def data_uri_json(rng: random.Random, raw_bytes: int) -> str:
    """A JSON result carrying an inline image as a data URI (not padding: it is the payload)."""
    return json.dumps(
        {
            "file": "chart.png",
            "mimeType": "image/png",
            "url": "data:image/png;base64," + base64_blob(rng, raw_bytes),
            "caption": english_sentence(rng),
        }
    )


def tool_listing(rng: random.Random, tools: int) -> str:
    """A tools/list result: long English descriptions inside JSON schemas."""
    listed = []
    for _ in range(tools):
        name = "_".join(words(rng, "en", 2))
        props = {
            w: {
                "type": rng.choice(("string", "integer", "boolean")),
                "description": english_sentence(rng, low=4, high=12),
            }
            for w in words(rng, "en", rng.randint(1, 5))
        }
        listed.append(
            {
                "name": name,
                "description": " ".join(english_sentence(rng) for _ in range(rng.randint(1, 4))),
                "inputSchema": {"type": "object", "properties": props, "required": list(props)[:1]},
                "annotations": {"readOnlyHint": rng.random() < 0.5},
            }
        )
    return json.dumps({"tools": listed}, indent=2, ensure_ascii=False)


def csv_table(rng: random.Random, rows: int) -> str:
    out = ["order_id,customer,sku,quantity,unit_price,currency,ordered_at,status"]
    for n in range(rows):
        customer = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        sku = f"SKU-{rng.randint(1000, 9999)}-{rng.choice('ABCDEFGH')}"
        price = f"{rng.uniform(1, 500):.2f},{rng.choice(('EUR', 'USD', 'JPY'))}"
        quantity, status = rng.randint(1, 12), rng.choice(_STATUS)
        out.append(f"{500_000 + n},{customer},{sku},{quantity},{price},{timestamp(rng)},{status}")
    return "\n".join(out)


def sql_dump(rng: random.Random, rows: int) -> str:
    out = [
        "CREATE TABLE users (\n  id BIGINT PRIMARY KEY,\n  email TEXT NOT NULL UNIQUE,\n  name TEXT,\n"
        "  status VARCHAR(16) NOT NULL DEFAULT 'pending',\n  created_at TIMESTAMPTZ NOT NULL\n);"
    ]
    for n in range(rows):
        rec = user_record(rng, n)
        values = f"{rec['id']}, '{rec['email']}', '{rec['name']}', '{rec['status']}', '{rec['created_at']}'"
        out.append(f"INSERT INTO users (id, email, name, status, created_at) VALUES ({values});")
    out.append("SELECT status, count(*) FROM users GROUP BY status ORDER BY 2 DESC;")
    return "\n".join(out)


_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {app}
  labels:
    app: {app}
    tier: {tier}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {app}
  template:
    metadata:
      labels:
        app: {app}
    spec:
      containers:
        - name: {app}
          image: registry.example.com/{app}:{version}
          ports:
            - containerPort: {port}
          resources:
            limits:
              cpu: {cpu}
              memory: {memory}
"""


def yaml_manifests(rng: random.Random, count: int) -> str:
    docs = []
    for _ in range(count):
        docs.append(
            _DEPLOYMENT.format(
                app="-".join(words(rng, "en", 2)),
                tier=rng.choice(("web", "api", "worker")),
                replicas=rng.randint(1, 6),
                version=f"{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
                port=rng.choice((80, 8080, 9000, 3000)),
                cpu=rng.choice(("250m", "500m", "1")),
                memory=rng.choice(("128Mi", "512Mi", "1Gi")),
            )
        )
    return "---\n".join(docs)


def url_list(rng: random.Random, count: int) -> str:
    out = []
    for _ in range(count):
        path = "/".join(words(rng, "en", rng.randint(2, 6)))
        token = base64.urlsafe_b64encode(rng.randbytes(rng.randint(12, 96))).decode().rstrip("=")
        source = rng.choice(("newsletter", "twitter", "partner"))
        campaign = "_".join(words(rng, "en", 3))
        out.append(
            f"https://www.example.com/{path}?utm_source={source}&utm_medium=email"
            f"&utm_campaign={campaign}&session={uid(rng)}&sig={token}"
        )
    return "\n".join(out)


def uuid_lines(rng: random.Random, count: int) -> str:
    return json.dumps({"ids": [uid(rng) for _ in range(count)]}, indent=1)


def hex_dump(rng: random.Random, size: int) -> str:
    """xxd output of a binary that mixes zero runs, text and random bytes."""
    blob = bytearray()
    while len(blob) < size:
        kind = rng.random()
        if kind < 0.5:
            blob += rng.randbytes(rng.randint(16, 256))
        elif kind < 0.8:
            blob += english_sentence(rng).encode()
        else:
            blob += bytes(rng.randint(4, 48))
    lines = []
    for off in range(0, size, 16):
        row = bytes(blob[off : off + 16])
        pairs = " ".join(row[i : i + 2].hex() for i in range(0, len(row), 2))
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{off:08x}: {pairs:<39}  {shown}")
    return "\n".join(lines)


def fasta(rng: random.Random, bases: int) -> str:
    """A DNA sequence: four letters, legitimately. Not padding."""
    seq = "".join(rng.choices("ACGT", weights=(29, 21, 21, 29), k=bases))
    return ">chr7:55019017-55211628 EGFR\n" + "\n".join(seq[i : i + 60] for i in range(0, bases, 60))


def app_log(rng: random.Random, lines: int) -> str:
    out = []
    moment = _EPOCH
    for _ in range(lines):
        moment += timedelta(milliseconds=rng.randint(1, 900))
        level = rng.choice(_LEVELS)
        msg = rng.choice(
            (
                f"GET /api/v1/users/{rng.randint(1, 99999)} 200 {rng.randint(2, 300)}ms",
                f"POST /api/v1/orders 201 {rng.randint(20, 900)}ms bytes={rng.randint(100, 9000)}",
                f"pool: acquired connection {rng.randint(1, 32)}/32 wait={rng.random():.3f}s",
                f"job {uid(rng)[:8]} finished in {rng.uniform(0.1, 30):.2f}s",
                english_sentence(rng, low=4, high=12),
            )
        )
        thread = rng.choice(("main", "worker-1", "worker-2", "http-nio-8080-exec-3"))
        out.append(f"{moment.isoformat(timespec='milliseconds')} {level:<5} [{thread}] {msg}")
    return "\n".join(out)


def psql_table(rng: random.Random, rows: int) -> str:
    """Terminal table output with box separators."""
    out = [
        " id  |        email              | status    | score ",
        "-----+---------------------------+-----------+-------",
    ]
    for n in range(rows):
        rec = user_record(rng, n)
        out.append(f" {n:<3} | {rec['email']!s:<25} | {rec['status']!s:<9} | {rec['score']!s:>5} ")
    out.append(f"({rows} rows)")
    return "\n".join(out)
