"""Guard against a green run that tested nothing: fail if far fewer tests are collected.

pytest exits with code 5 when it collects no tests, which CI treats as failure;
this additionally catches a suite whose test modules silently stopped being collected.
"""

MIN_TESTS = 50


def test_suite_is_collected(request):
    collected = request.session.testscollected
    assert collected >= MIN_TESTS, (
        f"only {collected} tests collected; expected at least {MIN_TESTS}. "
        "Did a test module fail to import or get excluded?")
