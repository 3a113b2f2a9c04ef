"""The explorer: a page the node serves on its public listener at ``/explorer/``, made of
static files shipped with the package (``static/``) that read the chain through the public
RPC and the stream in the visitor's browser. It imports nothing of the node: the node mounts
it (``node.app``) when ``http-explorer`` is on."""

from node.explorer.static import PREFIX, StaticFiles, mount

__all__ = ["PREFIX", "StaticFiles", "mount"]
