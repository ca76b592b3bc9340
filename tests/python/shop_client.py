"""The seven cases against the shop's gRPC API, from Python: a client compiled from
examples/shop/proto/payments.proto with grpcio-tools, run by tests/tests/grpc_python.rs.

    python shop_client.py GENERATED_DIR QUICK SLOW SHORT_TTL FAILING

QUICK, SLOW (payments take 1.5 s), SHORT_TTL (records kept 10 s) and FAILING (a
CreatePayment whose first call fails INTERNAL) are host:port addresses. Prints one line per
case and exits 1 on the first that does not hold.
"""

import sys
import threading
import time
import uuid

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402

import payments_pb2  # noqa: E402
import payments_pb2_grpc  # noqa: E402

QUICK, SLOW, SHORT_TTL, FAILING = sys.argv[2:6]


def stub(addr):
    return payments_pb2_grpc.PaymentsStub(grpc.insecure_channel(addr))


def metadata(user, key=None):
    pairs = [("authorization", "Bearer " + user)]
    if key is not None:
        pairs.append(("idempotency-key", key))
    return pairs


def pay(client, user, key=None, amount=9800, request_id="", timeout=30):
    """(payment, replayed) or raises grpc.RpcError."""
    request = payments_pb2.CreatePaymentRequest(amount=amount, currency="JPY", request_id=request_id)
    payment, call = client.CreatePayment.with_call(request, metadata=metadata(user, key), timeout=timeout)
    replayed = dict(call.initial_metadata()).get("idempotent-replayed") == "true"
    return payment, replayed


def details(error):
    """The code, the ErrorInfo reason and the RetryInfo delay of a refusal."""
    trailing = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailing["grpc-status-details-bin"])
    reason, delay = None, None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            delay = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
    return error.code(), reason, delay


def refused(call, code, reason):
    try:
        call()
    except grpc.RpcError as error:
        got = details(error)
        assert got[:2] == (code, reason), got
        return got[2]
    raise AssertionError("not refused")


def listed(client, user):
    return list(client.ListPayments(payments_pb2.ListPaymentsRequest(), metadata=metadata(user)).payments)


def user():
    return "py-" + uuid.uuid4().hex[:12]


def case_1():
    client, alice, key = stub(QUICK), user(), str(uuid.uuid4())
    first, replayed = pay(client, alice, key)
    assert not replayed
    second, replayed = pay(client, alice, key)
    assert replayed and second == first, (second, first)
    assert listed(client, alice) == [first]


def case_2():
    client, alice, key = stub(QUICK), user(), str(uuid.uuid4())
    first, _ = pay(client, alice, key)
    refused(lambda: pay(client, alice, key, amount=1200), grpc.StatusCode.FAILED_PRECONDITION, "KEY_REUSED")
    assert listed(client, alice) == [first]


def case_3():
    client, alice, key = stub(SLOW), user(), str(uuid.uuid4())
    answers = []
    calls = [threading.Thread(target=lambda: answers.append(attempt(client, alice, key))) for _ in range(2)]
    for call in calls:
        call.start()
    for call in calls:
        call.join()
    kinds = sorted(kind for kind, _ in answers)
    assert kinds == ["aborted", "paid"], answers
    delay = [value for kind, value in answers if kind == "aborted"][0]
    assert delay is not None and delay >= 1, delay


def attempt(client, alice, key):
    try:
        return "paid", pay(client, alice, key)
    except grpc.RpcError as error:
        code, reason, delay = details(error)
        assert (code, reason) == (grpc.StatusCode.ABORTED, "REQUEST_IN_FLIGHT"), (code, reason)
        return "aborted", delay


def case_4():
    client, alice = stub(QUICK), user()
    refused(lambda: pay(client, alice), grpc.StatusCode.INVALID_ARGUMENT, "KEY_MISSING")
    assert listed(client, alice) == []


def case_5():
    client, alice, key = stub(SLOW), user(), str(uuid.uuid4())
    try:
        pay(client, alice, key, timeout=0.2)
        raise AssertionError("the first call did not time out")
    except grpc.RpcError as error:
        # The client's deadline, or tonic's server answering the same deadline first.
        assert error.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED), error
    while True:
        try:
            payment, replayed = pay(client, alice, key)
            break
        except grpc.RpcError as error:
            code, reason, delay = details(error)
            assert (code, reason) == (grpc.StatusCode.ABORTED, "REQUEST_IN_FLIGHT"), (code, reason)
            time.sleep(delay)
    assert replayed
    assert listed(client, alice) == [payment]


def case_6():
    client, alice, key = stub(SHORT_TTL), user(), str(uuid.uuid4())
    first, _ = pay(client, alice, key)
    deadline = time.monotonic() + 30
    while True:
        again, replayed = pay(client, alice, key)
        if not replayed:
            break
        assert time.monotonic() < deadline, "the record outlived its TTL"
        time.sleep(0.2)
    assert again.id != first.id
    assert len(listed(client, alice)) == 2


def case_7():
    client, alice, key = stub(FAILING), user(), str(uuid.uuid4())
    try:
        pay(client, alice, key)
        raise AssertionError("the first call did not fail")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INTERNAL, error
    _, replayed = pay(client, alice, key)
    assert not replayed, "the failed call's key was released, and the retry ran"


def scope_and_request_id():
    client, alice, bob, key = stub(QUICK), user(), user(), str(uuid.uuid4())
    alices, _ = pay(client, alice, request_id=key)
    again, replayed = pay(client, alice, request_id=key)
    assert replayed and again == alices
    bobs, replayed = pay(client, bob, request_id=key)
    assert not replayed and bobs.id != alices.id


for case in [case_1, case_2, case_3, case_4, case_5, case_6, case_7, scope_and_request_id]:
    case()
    print("ok", case.__name__, flush=True)
print("8 passed, 0 failed")
