"""rocketpy analytics: the PySpark job over broker metrics dumps (see README.md).

Not part of the ``rocketpy`` package: ``rocketpy`` never imports this package or pyspark.
"""
