"""Server addresses in the sandbox cloud: each subnet's pool, each server's ports.

Where it sits: `model.Cloud` keeps one `AddressPool` per subnet and gives a
new server a `Port` on each of its networks, from the network's first
subnet; deleting the server gives the addresses back. Pure.
"""

from __future__ import annotations

import heapq
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.errors import ConflictError


@dataclass(frozen=True)
class Port:
    """A server's address on one network, allocated from one subnet."""

    network: str
    subnet: str
    address: str


@dataclass
class AddressPool:
    """Addresses of one subnet: the gateway is the first host, servers get the next free."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    next_offset: int = 2
    released: list[int] = field(default_factory=list)  # heap of offsets free again
    owners: dict[str, str] = field(default_factory=dict)  # address -> server id

    @property
    def gateway(self) -> str | None:
        return str(self.network[1]) if self.network.num_addresses >= 4 else None

    def allocate(self, server_id: str) -> str | None:
        last = self.network.num_addresses - (2 if self.network.version == 4 else 1)
        if self.released:
            offset = heapq.heappop(self.released)
        elif self.next_offset <= last:
            offset = self.next_offset
            self.next_offset += 1
        else:
            return None
        address = str(self.network[offset])
        self.owners[address] = server_id
        return address

    @classmethod
    def restored(
        cls, network: ipaddress.IPv4Network | ipaddress.IPv6Network, owners: Mapping[str, str]
    ) -> AddressPool:
        """The pool of a subnet whose addresses `owners` (address -> server id) hold, as
        a restarted cloud rebuilds it: it hands out the same addresses next as the pool
        it stands for, since both always give the lowest free one."""
        taken = {int(ipaddress.ip_address(a)) - int(network.network_address) for a in owners}
        next_offset = max(taken, default=1) + 1
        free = [offset for offset in range(2, next_offset) if offset not in taken]  # sorted: a heap
        return cls(network, max(next_offset, 2), free, dict(owners))

    def release(self, address: str) -> None:
        if self.owners.pop(address, None) is not None:
            offset = int(ipaddress.ip_address(address)) - int(self.network.network_address)
            heapq.heappush(self.released, offset)


def allocate_ports(
    server_id: str,
    networks: Sequence[str],
    subnets: Mapping[str, Sequence[str]],
    pools: Mapping[str, AddressPool],
) -> tuple[Port, ...]:
    """An address on each network from its first subnet (none on a network without
    subnets); all or nothing: ConflictError when a subnet is full."""
    ports: list[Port] = []
    for network in networks:
        if not subnets.get(network):
            continue
        subnet = subnets[network][0]
        address = pools[subnet].allocate(server_id)
        if address is None:
            for port in ports:
                pools[port.subnet].release(port.address)
            raise ConflictError(f"subnet {subnet} of network {network} has no free addresses")
        ports.append(Port(network, subnet, address))
    return tuple(ports)
