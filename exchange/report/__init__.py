"""The operators' report (contract 8): collect, model, words, masking, schedule, formats."""
