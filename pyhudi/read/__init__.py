"""Reading tables: the file-group (file slice) reader, scan planning and the Spark read of file slices."""
