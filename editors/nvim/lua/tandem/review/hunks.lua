-- The pure part of the inline review: a `WorkspaceEdit` from the daemon
-- as a list of files with their hunks, what each hunk looks like on the
-- buffer's lines, and applying chosen hunks to a list of lines. No
-- buffers, no windows: tested on its own (tests/e2e/nvim/hunks.rs).
local M = {}

--- Whether any change annotation of `edit` asks for confirmation.
function M.needs_confirmation(edit)
  for _, annotation in pairs(edit and edit.changeAnnotations or {}) do
    if annotation.needsConfirmation then
      return true
    end
  end
  return false
end

--- The files of a WorkspaceEdit, in order:
--- `{kind = 'update'|'create'|'delete'|'move', uri, new_uri?, edits}`.
--- An update's edits are its hunks (one TextEdit per hunk); a created,
--- deleted or moved file is one decision, its edits included.
function M.files(edit)
  local files, by_uri = {}, {}
  local function file(uri, kind)
    local f = by_uri[uri]
    if not f then
      f = { kind = kind, uri = uri, edits = {} }
      by_uri[uri] = f
      table.insert(files, f)
    elseif kind ~= 'update' then
      f.kind = kind
    end
    return f
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.kind == 'create' then
      file(change.uri, 'create')
    elseif change.kind == 'delete' then
      file(change.uri, 'delete')
    elseif change.kind == 'rename' then
      local f = file(change.oldUri, 'move')
      f.new_uri = change.newUri
    elseif change.textDocument then
      local f = file(change.textDocument.uri, 'update')
      f.version = change.textDocument.version
      vim.list_extend(f.edits, change.edits or {})
    end
  end
  for uri, edits in pairs(edit.changes or {}) do
    vim.list_extend(file(uri, 'update').edits, edits)
  end
  return files
end

--- How hunk `edit` (a TextEdit with byte columns) shows on `lines`, the
--- buffer's lines: the rows it removes (`first`..`last`, 0-based, none
--- when `last < first`), and the lines that take their place.
--- @return {first: integer, last: integer, new: string[]}
function M.preview(lines, edit)
  local s, e = edit.range.start, edit.range['end']
  local split = function(text)
    return vim.split(text, '\n', { plain = true })
  end
  if s.line == e.line and s.character == 0 and e.character == 0 and edit.newText:sub(-1) == '\n' then
    -- Whole lines inserted before row s.line.
    return { first = s.line, last = s.line - 1, new = split(edit.newText:sub(1, -2)) }
  end
  local whole = e.character == 0 and e.line > s.line
  local prefix = (lines[s.line + 1] or ''):sub(1, s.character)
  local suffix = whole and '' or (lines[e.line + 1] or ''):sub(e.character + 1)
  local text = prefix .. edit.newText .. suffix
  local new
  if not whole then
    new = split(text)
  elseif text == '' then
    new = {}
  else
    new = split(text:sub(-1) == '\n' and text:sub(1, -2) or text)
  end
  local last = whole and e.line - 1 or e.line
  return { first = s.line, last = math.min(last, #lines - 1), new = new }
end

--- `edit` moved down by `delta` rows (the user added lines above it), as
--- a plain TextEdit (no annotation: it is being applied, not proposed).
function M.shifted(edit, delta)
  local s, e = edit.range.start, edit.range['end']
  return {
    newText = edit.newText,
    range = {
      start = { line = s.line + delta, character = s.character },
      ['end'] = { line = e.line + delta, character = e.character },
    },
  }
end

--- `lines` with `edits` applied (byte columns; edits must not overlap).
function M.apply(lines, edits)
  local text = table.concat(lines, '\n') .. '\n'
  local starts, pos = {}, 1
  for i = 1, #lines + 1 do
    starts[i] = pos
    pos = pos + #(lines[i] or '') + 1
  end
  local function offset(p)
    local base = starts[p.line + 1]
    if not base then
      return #text + 1
    end
    return base + math.min(p.character, #(lines[p.line + 1] or ''))
  end
  local sorted = vim.list_slice(edits)
  table.sort(sorted, function(a, b)
    return offset(a.range.start) > offset(b.range.start)
  end)
  for _, edit in ipairs(sorted) do
    local from, to = offset(edit.range.start), offset(edit.range['end'])
    text = text:sub(1, from - 1) .. edit.newText .. text:sub(to)
  end
  if text:sub(-1) == '\n' then
    text = text:sub(1, -2)
  end
  return vim.split(text, '\n', { plain = true })
end

--- The lines of a file the edit creates (its edits insert the text).
function M.created(edits)
  local lines = M.apply({}, edits)
  if lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- Whether every hunk of every file has a decision.
function M.all_decided(files)
  for _, f in ipairs(files) do
    for _, hunk in ipairs(f.hunks) do
      if hunk.decision == nil then
        return false
      end
    end
  end
  return true
end

--- How many hunks were accepted and rejected.
function M.tally(files)
  local accepted, rejected = 0, 0
  for _, f in ipairs(files) do
    for _, hunk in ipairs(f.hunks) do
      if hunk.decision == 'accept' then
        accepted = accepted + 1
      elseif hunk.decision == 'reject' then
        rejected = rejected + 1
      end
    end
  end
  return accepted, rejected
end

--- The index of the hunk whose rows contain `row` (0-based), given each
--- hunk's rows as `{first, last}` (an insertion has `last < first` and
--- counts as its row `first`).
function M.at_row(spans, row)
  for i, span in ipairs(spans) do
    if row >= span[1] and row <= math.max(span[1], span[2]) then
      return i
    end
  end
end

return M
