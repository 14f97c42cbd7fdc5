"""The ground floor: small shared leaves every other floor may import, and that import nothing above.

``choices`` (the torch-free enums shared with the CLI), ``options`` (the run spec), ``inputs`` (example
inputs and their sizes), ``names`` (readable node and module names), ``guard`` (the boundary around user
code), ``tied`` (tied parameters kept tied through a conversion), ``limits`` (sizes checked before
allocation, and byte sizes as written), ``atomic`` (one way to write a file), ``display`` (the notebook hook).
"""
