"""The scenarios that ship with sopbus, with their simulator fixtures and data files.

``sopbus run NAME`` (and ``sopbus.run_scenario("NAME")``) runs ``NAME.toml`` from here
when no such file is in the working directory; ``sopbus examples`` lists them. The Python
modules beside them (``my_reviewer.py``) are examples of user code, imported by the
scenarios that name them, never by sopbus itself.
"""

# Nothing here is for other packages: the scenarios are data, and their modules are user code.
__all__: list[str] = []
