"""Vendors' APIs on loopback, one a module, for the connector tests (no test reaches the internet).

Each behaves as its vendor documents: the real field names, paging, errors
with the real bodies, 429 with Retry-After. `Upstream` gives them a
server on 127.0.0.1, a log of the requests made, faults to inject (a status
for the next N requests, a server that dies after N answers) and a clock
for `updated` times.
"""
