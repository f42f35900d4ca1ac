"""The namespace hosts of tests/support/netns_hosts.py: reached over their link, cleaned up."""
import os
import subprocess
import sys
import time

import pytest

from tests.support import netns_hosts
from tests.support.postgres_server import USER

needs_netns = pytest.mark.skipif(netns_hosts.missing() is not None,
                                 reason=str(netns_hosts.missing()))

CONNECT = '''
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20).close()
    print('connected')
except ConnectionRefusedError:
    print('refused')
'''


def run_in(host, arguments, env=None):
    done = subprocess.run(host.command(arguments), capture_output=True, text=True, timeout=120,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_client_in_a_host_reaches_the_server_over_its_own_link(postgres_server, host_network,
                                                                  network_hosts):
    first, second = network_hosts('first'), network_hosts('second')
    psql = os.path.join(postgres_server.bin_dir, 'psql')
    env = dict(os.environ, PGPASSWORD=postgres_server.password)
    for host in (first, second):
        # The server sees the client at the host's own address: it came over the host's link.
        seen = run_in(host, [psql, '-X', '-A', '-t', '-h', host_network.server_address,
                             '-p', postgres_server.port, '-U', USER, '-d', 'postgres',
                             '-c', 'SELECT host(inet_client_addr())'], env)
        assert seen == host.address
    assert first.address != second.address


def test_a_hosts_localhost_is_its_own_not_the_servers(postgres_server, host_network,
                                                      network_hosts):
    host = network_hosts('alone')
    assert run_in(host, [sys.executable, '-c', CONNECT, '127.0.0.1',
                         postgres_server.port]) == 'refused'
    assert run_in(host, [sys.executable, '-c', CONNECT, host_network.server_address,
                         postgres_server.port]) == 'connected'


@needs_netns
def test_closing_the_network_ends_its_processes_and_removes_every_namespace_and_link():
    with netns_hosts.HostNetwork() as network:
        host = network.add_host('busy')
        # A process that would wait for ever: it is ended with its host.
        process = subprocess.Popen(host.command([sys.executable, '-c', 'input()']),
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        made = network.resources()
        assert host.namespace in made and network.bridge in made and host.link in made
        assert process.pid in wait_for_pids(host, process.pid)
    assert process.wait(timeout=60) == -9
    process.stdin.close()  # its reader is gone; nothing is left to the garbage collector
    assert network.resources() == []


def wait_for_pids(host, pid, timeout=60):
    deadline = time.monotonic() + timeout
    while pid not in host.pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    return host.pids()


@needs_netns
def test_a_failing_test_leaves_no_namespace_or_link():
    class Failure(Exception):
        pass
    with pytest.raises(Failure):
        with netns_hosts.HostNetwork() as network:
            network.add_host('a')
            network.add_host('b')
            raise Failure
    assert network.resources() == []


@needs_netns
def test_what_a_killed_session_left_is_removed_by_the_next():
    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    namespace, bridge = 'rut-{}-1-left'.format(gone.pid), 'rutb{}n1'.format(gone.pid)
    subprocess.run(['ip', 'netns', 'add', namespace], check=True)
    subprocess.run(['ip', 'link', 'add', bridge, 'type', 'bridge'], check=True)
    try:
        netns_hosts.remove_leftovers()
        assert namespace not in netns_hosts._namespaces()
        assert subprocess.run(['ip', 'link', 'show', bridge], capture_output=True
                              ).returncode != 0
    finally:
        subprocess.run(['ip', 'netns', 'delete', namespace], capture_output=True)
        subprocess.run(['ip', 'link', 'delete', bridge], capture_output=True)


@needs_netns
def test_host_names_are_checked():
    with netns_hosts.HostNetwork() as network:
        with pytest.raises(ValueError, match="host name 'Bad Name'"):
            network.add_host('Bad Name')
