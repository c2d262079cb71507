"""rlmetrics.health.webhook: the JSON body, one POST, and the outbox's retries, backoff and give-up,
against a local HTTP server on 127.0.0.1 (a thread of this test)."""

from __future__ import annotations

import json
import socket
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlmetrics.errors import HealthWarning
from rlmetrics.health.findings import Finding
from rlmetrics.health.webhook import Attempt, Outbox, finding_payload, finding_text, post_json

FINDING = Finding("nonfinite", "error", 7, ("actor/pg_loss",), {"value": "nan"}, "Lower the learning rate.")


class Hook:
    """A local webhook: answers each POST with the next status of ``statuses`` (then 200), after
    ``delay`` seconds; keeps the bodies."""

    def __init__(self, statuses=(), delay=0.0):
        self.statuses, self.delay, self.bodies = list(statuses), delay, []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.bodies.append(
                    (json.loads(body), self.headers["Content-Type"], self.headers["User-Agent"])
                )
                time.sleep(hook.delay)
                status = hook.statuses.pop(0) if hook.statuses else 200
                try:
                    self.send_response(status)
                    self.end_headers()
                except OSError:  # the client gave up waiting
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/secret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"  # nothing listens there any more


def test_text_names_run_kind_severity_step_and_advice():
    text = finding_text(FINDING, run="exp1")
    assert text == (
        "rlmetrics: exp1: nonfinite (error) from step 7 in actor/pg_loss: value=nan. Lower the learning rate."
    )


def test_text_is_cut_to_what_discord_takes():
    long = Finding("grad_spike", "warning", 1, ("g",), {"at": list(range(2000))})
    assert len(finding_text(long, run="r")) == 1900


def test_payload_carries_slack_discord_and_structured_fields():
    body = finding_payload(FINDING, run="exp1", source="logs/exp1/metrics.jsonl")
    assert body["text"] == body["content"] == finding_text(FINDING, run="exp1")
    assert body["rlmetrics"] == {"run": "exp1", "source": "logs/exp1/metrics.jsonl", **FINDING.to_dict()}
    json.dumps(body, allow_nan=False)  # plain JSON


@pytest.mark.parametrize(
    ("status", "ok", "retry"),
    [
        (200, True, False),
        (204, True, False),
        (500, False, True),
        (503, False, True),
        (429, False, True),
        (404, False, False),
        (400, False, False),
    ],
    ids=["200", "204", "500", "503", "429", "404", "400"],
)
def test_post_json_outcome_by_status(status, ok, retry):
    with Hook([status]) as hook:
        attempt = post_json(hook.url, {"text": "hi"}, timeout=2.0)
    assert (attempt.ok, attempt.retry) == (ok, retry)
    assert str(status) in attempt.detail
    assert hook.bodies[0] == ({"text": "hi"}, "application/json", hook.bodies[0][2])
    assert hook.bodies[0][2].startswith("rlmetrics/")


def test_post_json_dead_endpoint_is_retryable_and_quick():
    start = time.monotonic()
    attempt = post_json(closed_port_url(), {"text": "hi"}, timeout=2.0)
    assert not attempt.ok and attempt.retry
    assert time.monotonic() - start < 1.0


def test_post_json_slow_endpoint_times_out():
    with Hook(delay=1.5) as hook:
        start = time.monotonic()
        attempt = post_json(hook.url, {"text": "hi"}, timeout=0.2)
        elapsed = time.monotonic() - start
    assert not attempt.ok and attempt.retry
    assert elapsed < 1.0
    assert "timed out" in attempt.detail.lower()


def test_post_json_not_a_url_is_not_retried():
    attempt = post_json("nota://url", {"text": "hi"})
    assert not attempt.ok and not attempt.retry


def test_outbox_retries_after_a_500_and_delivers():
    with Hook([500, 500]) as hook:
        box = Outbox(backoff=0.01, max_backoff=0.02, timeout=2.0)
        box.put(hook.url, finding_payload(FINDING, run="exp1"))
        assert box.deliver_due() == 0 and len(box) == 1  # the 500: due again after the backoff
        box.flush(deadline=box.clock() + 5.0)
    assert (box.sent, box.failed, len(box)) == (1, 0, 0)
    assert len(hook.bodies) == 3
    assert hook.bodies[-1][0]["rlmetrics"]["kind"] == "nonfinite"


def test_outbox_gives_up_a_dead_endpoint_with_one_warning():
    box = Outbox(tries=2, backoff=0.0, timeout=0.5)
    url = closed_port_url()
    box.put(url, {"text": "a"})
    box.put(url, {"text": "b"})
    start = time.monotonic()
    with pytest.warns(
        HealthWarning, match=r"webhook http://127\.0\.0\.1:\d+/\.\.\.: gave up .* after 2 attempt"
    ) as caught:
        box.flush(deadline=box.clock() + 5.0)
    assert time.monotonic() - start < 3.0
    assert len([w for w in caught if issubclass(w.category, HealthWarning)]) == 1  # not one per delivery
    assert (box.sent, box.failed, len(box)) == (0, 2, 0)


def test_outbox_warning_hides_the_webhook_path():
    box = Outbox(tries=1, post=lambda url, payload, timeout: Attempt(False, False, "HTTP 404 Not Found"))
    box.put("https://hooks.slack.com/services/T0/B0/secret", {})
    with pytest.warns(HealthWarning, match=r"https://hooks\.slack\.com/\.\.\.") as caught:
        box.deliver_due()
    assert "secret" not in str(caught[0].message)


def test_outbox_refused_body_is_given_up_at_once():
    calls = []

    def post(url, payload, timeout):
        calls.append(url)
        return Attempt(False, False, "HTTP 400 Bad Request")

    box = Outbox(tries=5, post=post)
    box.put("http://127.0.0.1:9/x", {})
    with pytest.warns(HealthWarning, match="after 1 attempt"):
        box.deliver_due()
    assert calls == ["http://127.0.0.1:9/x"] and box.failed == 1


def test_outbox_backoff_doubles_up_to_the_cap():
    now = [0.0]
    box = Outbox(
        tries=6,
        backoff=1.0,
        max_backoff=4.0,
        clock=lambda: now[0],
        post=lambda url, payload, timeout: Attempt(False, True, "HTTP 500"),
    )
    box.put("http://127.0.0.1:9/x", {})
    waits = []
    for _ in range(5):
        box.deliver_due()
        due = box.next_due()
        waits.append(due - now[0])
        now[0] = due
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HealthWarning)
        box.deliver_due()
    assert len(box) == 0 and box.failed == 1


def test_outbox_budget_leaves_the_rest_due():
    now = [0.0]

    def post(url, payload, timeout):
        now[0] += 1.0  # each attempt takes a second
        return Attempt(True, False, "HTTP 200")

    box = Outbox(clock=lambda: now[0], post=post)
    for i in range(3):
        box.put("http://127.0.0.1:9/x", {"i": i})
    assert box.deliver_due(budget=1.5) == 2
    assert len(box) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tries": 0}, "tries must be an int >= 1"),
        ({"timeout": -1.0}, "timeout must be a number >= 0"),
        ({"backoff": float("nan")}, "backoff must be a number >= 0"),
        ({"tries": True}, "tries must be"),
    ],
    ids=["tries-0", "timeout-negative", "backoff-nan", "tries-bool"],
)
def test_outbox_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Outbox(**kwargs)
