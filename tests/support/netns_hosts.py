"""Test "hosts" as Linux network namespaces joined by a bridge, for tests run as root.

:class:`HostNetwork` makes a bridge in this (the root) network namespace with an address of
a private /24 (``server_address``: a server of the test listens there) and, for each host
:meth:`~HostNetwork.add_host` makes, a namespace with its own loopback and one veth link to
the bridge. A process started inside (:meth:`Host.command`: ``ip netns exec NAME ...``)
reaches the root namespace only over that link, at ``server_address``, as a separate
machine on the same network would: its 127.0.0.1 is its own, and the machine's other
interfaces are not routed to it. The hosts share the machine's file systems, process ids
and host name.

Every name carries the creating process's id (``rut-<pid>-<n>-<host>`` namespaces,
``rutb<pid>n<k>`` bridges, ``rutv<pid>h<n>`` links), so that test sessions running side by
side never meet, and the /24 is one no interface or route of the machine uses. Removing a
host ends the processes still in its namespace (a test's, started there) and deletes it,
which deletes its link; closing the network removes its hosts and the bridge, also after a
failed test. What a killed session left behind (its pid gone) is removed by the next one.

:func:`missing` says why no namespace can be made here (not root, no ``ip``, no
permission), for a clean skip; the ``host_network`` fixture yields None then. Tested by
tests/support/test_netns_hosts.py.
"""
import contextlib
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

_NAMESPACE = re.compile(r'^rut-([0-9]+)-')
_LINK = re.compile(r'^rut[bvp]([0-9]+)')
# Candidate subnets: 10.200.0.0/24 ... 10.249.255.0/24, the first one tried chosen by pid.
_SUBNET_COUNT = 50 * 256
# Numbers for the bridges and hosts of this process, so that link names never repeat in it.
_bridge_numbers = itertools.count(1)
_host_numbers = itertools.count(1)
_missing_reason = []


def _ip(*arguments, check=True):
    done = subprocess.run([shutil.which('ip') or 'ip'] + [str(a) for a in arguments],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError('ip {} failed: {}'.format(' '.join(map(str, arguments)),
                                                     done.stderr.strip()))
    return done


def missing():
    """Why network namespaces cannot be made here, or None when they can (probed once)."""
    if not _missing_reason:
        _missing_reason.append(_probe())
    return _missing_reason[0]


def _probe():
    if not os.path.isdir('/proc/self/ns') or not hasattr(os, 'geteuid'):
        return 'network namespaces need Linux'
    if os.geteuid() != 0:
        return 'network namespaces need root (the tests run as uid {})'.format(os.geteuid())
    if shutil.which('ip') is None:
        return 'the ip command (iproute2) is not installed'
    name = 'rut-{}-probe'.format(os.getpid())
    made = _ip('netns', 'add', name, check=False)
    if made.returncode != 0:
        return 'ip netns add failed: {}'.format(made.stderr.strip())
    _ip('netns', 'delete', name, check=False)
    return None


def _pid_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def remove_leftovers():
    """Deletes the namespaces and links of this module whose creating process is gone."""
    for name in _namespaces():
        found = _NAMESPACE.match(name)
        if found and _pid_gone(int(found.group(1))):
            _ip('netns', 'delete', name, check=False)
    for link in json.loads(_ip('-j', 'link', 'show', check=False).stdout or '[]'):
        found = _LINK.match(link.get('ifname', ''))
        if found and _pid_gone(int(found.group(1))):
            _ip('link', 'delete', link['ifname'], check=False)


def _namespaces():
    # One line a namespace: "NAME" or "NAME (id: N)".
    return [line.split()[0] for line in _ip('netns', 'list', check=False).stdout.splitlines()
            if line.strip()]


def _used_networks():
    networks = []
    for entry in json.loads(_ip('-j', '-4', 'addr', 'show').stdout or '[]'):
        for info in entry.get('addr_info', []):
            networks.append(ipaddress.ip_network('{}/{}'.format(info['local'], info['prefixlen']),
                                                 strict=False))
    for route in json.loads(_ip('-j', '-4', 'route', 'show', 'table', 'all').stdout or '[]'):
        destination = route.get('dst', 'default')
        if destination != 'default':
            with contextlib.suppress(ValueError):
                networks.append(ipaddress.ip_network(destination, strict=False))
    return networks


def _free_subnet():
    used = _used_networks()
    first = os.getpid() % _SUBNET_COUNT
    for k in range(_SUBNET_COUNT):
        index = (first + k) % _SUBNET_COUNT
        subnet = ipaddress.ip_network('10.{}.{}.0/24'.format(200 + index // 256, index % 256))
        if not any(subnet.overlaps(other) for other in used):
            return subnet
    raise RuntimeError('no free /24 in 10.200.0.0-10.249.255.0 for the test hosts')


class Host(object):
    """One host: a network namespace with one address on the bridge.

    Attributes:
        name (str): The name the test gave.
        namespace (str): The namespace's name (``ip netns``).
        address (str): Its address on the bridge.
    """

    def __init__(self, name, namespace, address, link):
        self.name = name
        self.namespace = namespace
        self.address = address
        self.link = link

    def command(self, arguments):
        """``arguments`` run inside this host: ``ip netns exec <namespace> ...``."""
        return [shutil.which('ip') or 'ip', 'netns', 'exec', self.namespace] + [
            str(a) for a in arguments]

    def pids(self):
        """The processes in this host's namespace."""
        done = _ip('netns', 'pids', self.namespace, check=False)
        return [int(pid) for pid in done.stdout.split()]

    def __repr__(self):
        return 'Host({!r}, {})'.format(self.name, self.address)


class HostNetwork(object):
    """A bridge with an address for servers, and the hosts joined to it.

    ``with HostNetwork() as network: host = network.add_host('a')``.

    Attributes:
        subnet (str): The hosts' /24, ``"10.x.y.0/24"``.
        server_address (str): The bridge's address in the root namespace (``.1``).
    """

    def __init__(self):
        self.tag = str(os.getpid())
        self.bridge = 'rutb{}n{}'.format(self.tag, next(_bridge_numbers))
        self.subnet = None
        self.server_address = None
        self.hosts = []
        self._addresses = itertools.count(2)
        self._made = set()

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def open(self):
        """Makes the bridge on a free /24 (what a dead session left is removed first)."""
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        remove_leftovers()
        subnet = _free_subnet()
        try:
            _ip('link', 'add', self.bridge, 'type', 'bridge')
            self.server_address = str(subnet[1])
            _ip('addr', 'add', '{}/{}'.format(self.server_address, subnet.prefixlen), 'dev',
                self.bridge)
            _ip('link', 'set', self.bridge, 'up')
        except BaseException:
            self.close()
            raise
        self.subnet = str(subnet)

    def add_host(self, name):
        """A new host named ``name`` (a-z, digits, ``-``), up and joined to the bridge."""
        if not re.fullmatch(r'[a-z0-9-]{1,20}', name):
            raise ValueError('host name {!r}: 1-20 of a-z 0-9 -'.format(name))
        index = next(self._addresses)
        if index > 254:
            raise ValueError('a HostNetwork gives out 253 host addresses')
        number = next(_host_numbers)
        namespace = 'rut-{}-{}-{}'.format(self.tag, number, name)
        link, peer = 'rutv{}h{}'.format(self.tag, number), 'rutp{}h{}'.format(self.tag, number)
        address = str(ipaddress.ip_network(self.subnet)[index])
        host = Host(name, namespace, address, link)
        self.hosts.append(host)
        self._made |= {namespace, link, peer}
        _ip('netns', 'add', namespace)
        _ip('link', 'add', link, 'type', 'veth', 'peer', 'name', peer)
        _ip('link', 'set', peer, 'netns', namespace)
        _ip('link', 'set', link, 'master', self.bridge)
        _ip('link', 'set', link, 'up')
        prefix = ipaddress.ip_network(self.subnet).prefixlen
        for arguments in (('link', 'set', peer, 'name', 'eth0'),
                          ('addr', 'add', '{}/{}'.format(address, prefix), 'dev', 'eth0'),
                          ('link', 'set', 'eth0', 'up'), ('link', 'set', 'lo', 'up')):
            _ip('-n', namespace, *arguments)
        return host

    def remove_host(self, host, timeout=30.):
        """Ends the processes left in ``host`` and deletes its namespace and link."""
        pids = host.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while host.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        _ip('netns', 'delete', host.namespace, check=False)
        # Deleting the namespace deletes its end of the pair, and so the pair; a pair that was
        # made but never moved in is deleted here.
        _ip('link', 'delete', host.link, check=False)
        if host in self.hosts:
            self.hosts.remove(host)

    def close(self):
        """Removes every host, then the bridge; safe to call twice."""
        for host in list(self.hosts):
            self.remove_host(host)
        _ip('link', 'delete', self.bridge, check=False)

    def resources(self):
        """The namespaces and links of this network that exist now (the bridge, and each
        host's namespace and link, removed ones included)."""
        names = {self.bridge} | self._made
        present = set(_namespaces()) | {link.get('ifname') for link in json.loads(
            _ip('-j', 'link', 'show', check=False).stdout or '[]')}
        return sorted(names & present)


@pytest.fixture(scope='session')
def host_network():
    """The session's bridge for namespace hosts, or None where none can be made
    (:func:`missing` says why)."""
    if missing() is not None:
        yield None
        return
    with HostNetwork() as network:
        yield network


@pytest.fixture
def network_hosts(host_network):
    """Makes hosts on the session's network for one test (``network_hosts("a")``); removes them
    after it. Skips where namespaces cannot be made."""
    if host_network is None:
        pytest.skip(missing())
    made = []

    def make(name):
        made.append(host_network.add_host(name))
        return made[-1]
    yield make
    for host in made:
        host_network.remove_host(host)
