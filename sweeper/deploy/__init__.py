"""What a deployment needs to run the recommended setting without paying its cold compile."""
