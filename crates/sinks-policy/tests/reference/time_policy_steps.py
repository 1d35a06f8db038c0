"""What each message policy step costs in the Python reference (nats-sinks 0.4.3), in its own
process: the reference's own pipeline functions, timed per message on the messages and policy
sections of `policy_steps` (xtask/src/bin/support/policed.rs and order.rs, mirrored here).

Usage: python time_policy_steps.py COUNT [STEP,...]   (the reference's venv Python)

For each run (`none`, each step alone, `all`) the COUNT messages go through what the reference's
runner does to a fetched batch (`Runner.process_raw_batch`), in batches of 500: the envelope
built from the raw message (`envelope_from_nats_message`, which resolves mission metadata and
security labels), message authenticity, size policy, pre-sink policy, custody and priority lanes,
each with its section on only when the run names its step. One pass warms up, the second is
timed with this thread's CPU clock. Prints one JSON line per run, as `policy_steps` does:
{"step", "messages", "cpu_us_per_msg", "wall_us_per_msg"}. The HMAC key is the benchmark's fixed
payload key (BENCH_PAYLOAD_KEY_B64, read from the environment as the Rust side reads it)."""

import base64
import json
import os
import sys
import time
from datetime import UTC, datetime
from types import SimpleNamespace

from nats_sinks.core.authenticity import MessageAuthenticator, hmac_sha256_signature_b64
from nats_sinks.core.config import (
    CustodyConfig,
    MessageAuthenticityConfig,
    MessageMetadataConfig,
    MissionMetadataConfig,
    PreSinkPolicyConfig,
    PriorityLanesConfig,
    SecurityLabelProfileConfig,
    SizePolicyConfig,
)
from nats_sinks.core.consumer import envelope_from_nats_message
from nats_sinks.core.custody import attach_custody_metadata
from nats_sinks.core.policy import evaluate_pre_sink_policy
from nats_sinks.core.priority import order_by_priority_lanes
from nats_sinks.core.size_policy import evaluate_size_policy

KEY_ENV = "BENCH_PAYLOAD_KEY_B64"
ROOT = "benchfeat"
KEY_ID = "bench-producer"
LABELS = ["released", "orders"]
SIGNED = ["subject", "message_id", "labels"]
BATCH = 500
STEPS = [
    "mission_metadata",
    "security_labels",
    "message_authenticity",
    "size_policy",
    "pre_sink_policy",
    "custody",
    "priority_lanes",
]


def payload(i):
    """Order `i`: 256 bytes of JSON (order.rs)."""
    head = '{"order_id":%d,"customer":"c-%06d","amount":%d.%02d,"currency":"EUR","note":"' % (
        i,
        i % 997,
        i % 5000,
        i % 100,
    )
    tail = '"}'
    return (head + "x" * max(0, 256 - len(head) - len(tail)) + tail).encode()


def sections(enabled):
    """policed::sections(enabled, ROOT, KEY_ENV)."""
    return {
        "mission_metadata": {"enabled": enabled},
        "security_labels": {"enabled": enabled, "allowed_releasability": ["NATO", "FVEY"]},
        "message_authenticity": {
            "enabled": enabled,
            "rules": [
                {
                    "subject": f"{ROOT}.>",
                    "algorithm": "hmac-sha256",
                    "key_id": KEY_ID,
                    "key_b64_env": KEY_ENV,
                    "signed_fields": SIGNED,
                }
            ],
        },
        "size_policy": {"enabled": enabled},
        "pre_sink_policy": {
            "enabled": enabled,
            "rules": [{"subject": ">", "required_labels": ["released"], "max_payload_bytes": 65536}],
        },
        "custody": {"enabled": enabled, "key_id": "bench-custody"},
        "priority_lanes": {
            "enabled": enabled,
            "default_lane": "routine",
            "lanes": [
                {"name": "flash", "priorities": ["flash"], "weight": 4},
                {"name": "routine", "priorities": ["routine"]},
            ],
        },
    }


def raw_message(i, key):
    """Message `i` as nats-py hands it over (policed::message, stream sequence i + 1), signed."""
    subject = f"{ROOT}.orders.k{i % 8}"
    message_id = f"feat-{i}"
    headers = {
        "Nats-Msg-Id": message_id,
        "Nats-Sinks-Labels": ";".join(LABELS),
        "Nats-Sinks-Priority": "flash" if i % 4 == 0 else "routine",
        "Nats-Sinks-Mission-Metadata": '{"phase":"find","track":{"id":%d}}' % i,
        "Nats-Sinks-Security-Labels": '{"classification":"NATO SECRET","releasability":["NATO"]}',
        "Nats-Sinks-Authenticity-Algorithm": "hmac-sha256",
        "Nats-Sinks-Authenticity-Key-Id": KEY_ID,
    }
    metadata = SimpleNamespace(
        sequence=SimpleNamespace(stream=i + 1, consumer=i + 1),
        num_delivered=1,
        num_pending=0,
        timestamp=None,
        stream="BENCHFEAT",
        consumer="bench",
        domain=None,
    )
    message = SimpleNamespace(subject=subject, data=payload(i), headers=headers, metadata=metadata, reply=None)
    unsigned = envelope_from_nats_message(message, message_metadata=MessageMetadataConfig())
    headers["Nats-Sinks-Authenticity-Signature"] = hmac_sha256_signature_b64(
        unsigned, key=key, key_id=KEY_ID, signed_fields=SIGNED
    )
    return message


def pipeline(on):
    """The reference runner's steps with the sections in `on` enabled, as one function of a batch."""
    every = sections(True)
    section = lambda name: every[name] if name in on else {"enabled": False}  # noqa: E731
    message_metadata = MessageMetadataConfig()
    mission = MissionMetadataConfig(**section("mission_metadata"))
    labels = SecurityLabelProfileConfig(**section("security_labels"))
    authenticator = MessageAuthenticator.from_config(MessageAuthenticityConfig(**section("message_authenticity")))
    size = SizePolicyConfig(**section("size_policy"))
    presink = PreSinkPolicyConfig(**section("pre_sink_policy"))
    custody = CustodyConfig(**section("custody"))
    lanes = PriorityLanesConfig(**section("priority_lanes"))

    def run(batch):
        envelopes = [
            envelope_from_nats_message(
                m, message_metadata=message_metadata, mission_metadata=mission, security_labels=labels
            )
            for m in batch
        ]
        if authenticator is not None:
            evaluation = authenticator.evaluate(envelopes)
            assert not evaluation.has_rejections, evaluation.violations
        assert not evaluate_size_policy(envelopes, size).has_rejections
        assert not evaluate_pre_sink_policy(envelopes, presink).has_rejections
        envelopes = attach_custody_metadata(envelopes, config=custody)
        return order_by_priority_lanes(envelopes, lanes)

    return run


def main():
    count = int(sys.argv[1])
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    key = base64.b64decode(os.environ[KEY_ENV])
    messages = [raw_message(i, key) for i in range(count)]
    runs = [("none", [])] + [(step, [step]) for step in STEPS] + [("all", STEPS)]
    for name, on in runs:
        if only is not None and name not in only:
            continue
        run = pipeline(on)
        for _ in range(2):
            cpu, wall, out = time.thread_time(), time.perf_counter(), 0
            for start in range(0, count, BATCH):
                out += len(run(messages[start : start + BATCH]))
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        assert out == count, f"{name}: {out} of {count} messages came out"
        per = lambda seconds: seconds * 1e6 / count  # noqa: E731
        print(json.dumps({"step": name, "messages": count, "cpu_us_per_msg": per(cpu), "wall_us_per_msg": per(wall)}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
