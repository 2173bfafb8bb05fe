"""The password every test user gets (make_user), for tests that log in through the real form."""

PASSWORD = "pw-test-12345"
