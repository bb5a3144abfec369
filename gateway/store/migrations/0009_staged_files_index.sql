-- The start-up read of messages whose inbound files are still being moved into their
-- thread's workspace (gateway/store/messages.py: messages_with_staged_files). Only those
-- few rows are in this index, so the read does not scan every message at each start.

CREATE INDEX messages_with_staged_files
    ON messages (id)
    WHERE attachments IS NOT NULL AND persona IS NOT NULL AND instr(attachments, '"staged"') > 0;
