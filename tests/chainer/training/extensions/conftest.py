"""The loopback Slack server that the SlackReport tests post to."""
import pytest

from tests.support.slack_server import SlackServer


@pytest.fixture
def server():
    with SlackServer() as running:
        yield running
