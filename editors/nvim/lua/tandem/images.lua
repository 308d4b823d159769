-- Images in prompts: `@path/to/shot.png` in a prompt's text attaches that
-- file as an image block (base64, with its type). Only words that start
-- with `@` and end in an image extension are taken; the text is sent as
-- typed. The daemon checks the size and whether the model reads images.
local M = {}

M.TYPES = {
  png = 'image/png',
  jpg = 'image/jpeg',
  jpeg = 'image/jpeg',
  gif = 'image/gif',
  webp = 'image/webp',
}

local function read_bytes(path)
  local file, err = io.open(path, 'rb')
  if not file then
    return nil, err
  end
  local bytes = file:read('*a')
  file:close()
  return bytes
end

--- The image blocks named by `@path` words of `text`, in order; or nil and
--- an error naming the first file that could not be read.
function M.blocks(text)
  local blocks = {}
  for token in text:gmatch('%S+') do
    local word = token:match('^@(.+)$') or ''
    local ext = word:match('%.(%w+)$')
    local mime = ext and M.TYPES[ext:lower()]
    if mime then
      local path = vim.fn.fnamemodify(vim.fn.expand(word), ':p')
      local bytes, err = read_bytes(path)
      if not bytes then
        return nil, string.format('cannot read the image @%s: %s', word, err or 'unreadable')
      end
      table.insert(blocks, { type = 'image', mimeType = mime, data = vim.base64.encode(bytes) })
    end
  end
  return blocks
end

return M
