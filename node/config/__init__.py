"""The node's configuration: options declared once, the frozen sections, the file and flags,
and the configs of the parts built from them."""
