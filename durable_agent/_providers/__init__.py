"""Model providers over HTTP (httpx): one request, streamed or whole, in the wire format
the endpoint speaks, and the endpoint the environment describes.

Import each name from the module that defines it: a process loads only what it uses."""
