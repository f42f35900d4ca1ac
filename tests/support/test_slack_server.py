"""The loopback Slack server answers the real slack_sdk client as Slack would."""
import threading
import time

import pytest
from slack_sdk.errors import SlackApiError

from tests.support.slack_server import SlackServer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def server():
    with SlackServer() as running:
        yield running


def test_auth_test_names_the_bot(server):
    response = server.client().auth_test()
    assert response['ok'] and response['bot_id'] == 'B0'


def test_post_message_by_name_is_recorded_with_channel_id(server):
    response = server.client().chat_postMessage(channel='#general', text='hello')
    assert response['channel'] == 'C0000000001'
    assert server.messages == [{'channel': 'C0000000001', 'text': 'hello',
                                'ts': response['ts'], 'thread_ts': None}]


def test_reply_keeps_its_thread_ts(server):
    client = server.client()
    root = client.chat_postMessage(channel='C0000000002', text='root')
    client.chat_postMessage(channel='C0000000002', text='reply', thread_ts=root['ts'])
    assert server.messages[1]['thread_ts'] == root['ts']


def test_timestamps_increase(server):
    client = server.client()
    first = client.chat_postMessage(channel='general', text='a')['ts']
    second = client.chat_postMessage(channel='general', text='b')['ts']
    assert float(second) > float(first)


def test_unknown_channel_is_channel_not_found(server):
    with pytest.raises(SlackApiError) as info:
        server.client().chat_postMessage(channel='#nowhere', text='x')
    assert info.value.response['error'] == 'channel_not_found'


def test_text_over_slack_limit_is_msg_too_long(server):
    with pytest.raises(SlackApiError) as info:
        server.client().chat_postMessage(channel='general', text='x' * 40001)
    assert info.value.response['error'] == 'msg_too_long'


def test_conversations_list_pages_with_cursor():
    channels = [('C%010d' % i, 'channel-%d' % i) for i in range(5)]
    with SlackServer(channels=channels) as server:
        names = []
        for page in server.client().conversations_list(limit=2):
            names.extend(c['name'] for c in page['channels'])
    assert names == ['channel-%d' % i for i in range(5)]
    assert len(server.calls('conversations.list')) == 3


def test_files_upload_v2_shares_the_bytes_into_the_thread(server):
    client = server.client()
    root = client.chat_postMessage(channel='general', text='root')
    client.files_upload_v2(channel='C0000000001', file=b'\x89PNG\r\n', filename='loss.png',
                           title='loss', thread_ts=root['ts'])
    assert server.calls() == ['chat.postMessage', 'files.getUploadURLExternal', 'upload',
                              'files.completeUploadExternal']
    upload, = server.uploads
    assert (upload['data'], upload['filename'], upload['title']) == \
        (b'\x89PNG\r\n', 'loss.png', 'loss')
    assert (upload['channel'], upload['thread_ts']) == ('C0000000001', root['ts'])


def test_rejected_token_is_invalid_auth(server):
    server.reject_token()
    with pytest.raises(SlackApiError) as info:
        server.client().auth_test()
    assert info.value.response['error'] == 'invalid_auth'


def test_wrong_token_is_invalid_auth(server):
    with pytest.raises(SlackApiError) as info:
        server.client(token='xoxb-wrong').auth_test()
    assert info.value.response['error'] == 'invalid_auth'


def test_refused_method_answers_the_given_error(server):
    server.refuse('conversations.list', 'missing_scope')
    client = server.client()
    with pytest.raises(SlackApiError) as info:
        client.conversations_list()
    assert info.value.response['error'] == 'missing_scope'
    assert client.auth_test()['ok']


def test_fail_500_answers_http_500_then_recovers(server):
    server.fail('500', times=1)
    client = server.client()
    with pytest.raises(SlackApiError) as info:
        client.auth_test()
    assert info.value.response.status_code == 500
    assert client.auth_test()['ok']


def test_fail_429_carries_retry_after(server):
    server.fail('429', times=1, retry_after=7)
    with pytest.raises(SlackApiError) as info:
        server.client().chat_postMessage(channel='general', text='x')
    assert info.value.response.status_code == 429
    assert info.value.response.headers['Retry-After'] == '7'
    assert server.messages == []


@pytest.mark.parametrize('body', ['', '<html>Too Many Requests</html>'])
def test_fail_429_with_a_proxys_body_answers_that_body(server, body):
    server.fail('429', times=1, retry_after=3, body=body)
    with pytest.raises(SlackApiError) as info:
        server.client().chat_postMessage(channel='general', text='x')
    assert info.value.response.status_code == 429
    assert info.value.response.headers['Retry-After'] == '3'
    assert server.messages == []


@pytest.mark.parametrize('body', [None, '{"ok": tr'])
def test_fail_200_answers_a_page_that_is_not_the_apis_json(server, body):
    server.fail('200', times=1, body=body)
    client = server.client()
    with pytest.raises(SlackApiError, match='non-JSON') as info:
        client.chat_postMessage(channel='general', text='x')
    assert info.value.response.status_code == 200
    assert server.messages == []
    assert client.chat_postMessage(channel='general', text='y')['ok']


def test_drop_closes_the_connection_unanswered(server):
    server.fail('drop', times=1)
    with pytest.raises(Exception) as info:
        server.client().auth_test()
    assert not isinstance(info.value, SlackApiError)
    assert server.requests[0]['status'] == 'dropped'


def test_fault_limited_to_one_method_spares_others(server):
    server.fail('500', method='chat.postMessage')
    client = server.client()
    assert client.auth_test()['ok']
    with pytest.raises(SlackApiError):
        client.chat_postMessage(channel='general', text='x')


def test_fault_without_times_lasts_until_recover(server):
    server.fail('500')
    client = server.client()
    for _ in range(3):
        with pytest.raises(SlackApiError):
            client.auth_test()
    server.recover()
    assert client.auth_test()['ok']


def test_slow_server_answers_after_the_delay(server):
    server.slow(0.3)
    started = time.monotonic()
    server.client().auth_test()
    assert time.monotonic() - started >= 0.3


def test_slow_for_some_times_then_fast_again(server):
    server.slow(2, times=1)
    with pytest.raises(Exception, match='timed out'):
        server.client(timeout=0.2).auth_test()
    assert server.client(timeout=0.5).auth_test()['ok']


def test_slow_server_beyond_client_timeout_times_out(server):
    server.slow(2)
    with pytest.raises(Exception) as info:
        server.client(timeout=0.2).auth_test()
    assert 'timed out' in str(info.value)


def test_stop_releases_slow_answers_at_once():
    server = SlackServer().start()
    server.slow(30)
    client = server.client(timeout=60)
    thread = threading.Thread(target=client.auth_test, daemon=True)
    thread.start()
    time.sleep(0.2)  # the request is now waiting in the server
    started = time.monotonic()
    server.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5


def test_wait_for_raises_after_its_timeout(server):
    with pytest.raises(AssertionError, match='within 0.1 s'):
        server.wait_for(lambda s: s.messages, timeout=0.1)


def test_fail_rejects_unknown_kind(server):
    with pytest.raises(ValueError, match='kind'):
        server.fail('404')
