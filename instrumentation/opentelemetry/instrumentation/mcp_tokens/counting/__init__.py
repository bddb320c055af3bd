# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The counting service: one tokenizer per machine and user, shared by every instrumented process.

- address.py   where a user's service lives (a 0700 directory) and who may talk to it
- protocol.py  the frames on its sockets
- client.py    finding or starting it; the worker's connection; the guard's questions
- service.py   its supervisor: lock, sockets, tokenizer, counting processes
- counter.py   a counting process: clients' jobs in turn, at idle priority
- guard_server.py  the guard's questions, answered at normal priority
- options.py   the knobs
"""
