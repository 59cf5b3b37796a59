"""The built-in SOPs, one module each: ``sopbus.sops.builtin.<name>`` with a module
attribute ``SOP`` whose ``name`` is the module's name.

A module here is its own registration: :func:`sopbus.sops.sop_names` lists this folder
(without importing it), :func:`sopbus.sops.get_sop` imports the module a name asks for, and
every list of SOPs (``sopbus sops``, the error for an unknown name, the docs' tables,
checked by tests) reads those two. The modules import the SOP framework, never each other
(an import-linter contract). ``sopbus.sops.<name>`` still imports the same module.
"""

__all__: list[str] = []

__all__ = []
