"""Helpers the test suites share. Import them from here (``tests.helpers.MODULE``), never from a conftest file:
conftest files hold fixtures and hooks only."""
